from django.urls import path

app_name = "judges"
urlpatterns: list = []
