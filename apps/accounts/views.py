from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required

from apps.accounts.access import viewer_may_post

login_view = login_not_required(
    auth_views.LoginView.as_view(
        template_name="accounts/login.html", redirect_authenticated_user=True
    )
)
logout_view = viewer_may_post(auth_views.LogoutView.as_view())
